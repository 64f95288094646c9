// The module TestDocument_GeneratedClientsCallTheServer runs the client
// openapi-generator's go generator writes in: the generated module replaced
// from the test's directory, and what it imports, at pinned versions.
module example.com/live

go 1.23

require github.com/arbiterhq/arbiter-openapi-go v0.0.0

require gopkg.in/validator.v2 v2.0.1 // indirect

replace github.com/arbiterhq/arbiter-openapi-go => ./client
