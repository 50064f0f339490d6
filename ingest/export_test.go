package ingest

// SizeValidations reports how many sizes s validated against a schema.
func SizeValidations(s *Service) int64 { return s.sizeValidations.Load() }

// Unexported functions the external tests call.
var (
	CompileSizeSchema = compileSizeSchema
	EncodeCursor      = encodeCursor
	DecodeCursor      = decodePageCursor
)
