# tallyd's image: a static binary on distroless/static, as a non-root user.
#
#   docker build --build-arg VERSION=v0.3.0 -t tallyd:v0.3.0 .
#   docker run -p 8080:8080 -e TALLY_DATABASE_URL=… -e TALLY_ALLOW_PLAINTEXT=true \
#     -v /etc/tallyd/credentials.json:/etc/tallyd/credentials.json:ro tallyd:v0.3.0
#
# docs/operations.md, Deploying. CI (.ci/deploy-check) runs the build
# stage's Go build (deploy/build.sh) on every change.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# The modules first, so that a source change reuses their layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
RUN sh deploy/build.sh /out/tallyd "$VERSION"

# distroless/static: CA certificates, /etc/passwd with nonroot (65532), no
# shell, no package manager. HEALTHCHECK therefore runs tallyd itself.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tallyd /usr/local/bin/tallyd
USER 65532:65532
# All interfaces inside the container: give --tls-cert/--tls-key
# (TALLY_TLS_CERT, TALLY_TLS_KEY), or TALLY_ALLOW_PLAINTEXT=true when TLS
# ends at a proxy or load balancer in front of it.
ENV TALLY_LISTEN=0.0.0.0:8080 \
    TALLY_CREDENTIALS_FILE=/etc/tallyd/credentials.json \
    TALLY_LOG_FORMAT=json
EXPOSE 8080
# GET /healthz on TALLY_LISTEN (https when TALLY_TLS_CERT is set): liveness
# only, never the database.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["/usr/local/bin/tallyd", "healthcheck"]
# SIGTERM drains (--shutdown-delay) and finishes in-flight requests
# (--shutdown-timeout); give `docker stop -t` more than both.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tallyd"]
CMD ["serve"]
