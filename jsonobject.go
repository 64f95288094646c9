package arbiter

import "maps"

// DecodeJSONObject is DecodeJSONStrict for a JSON object that is not a
// request body, such as an MCP tool call's arguments: what names it in the
// sentences ("The argument object has an unknown field …").
func DecodeJSONObject(body []byte, v any, typeErrors map[string]string, what string) error {
	return decodeStrict(body, v, typeErrors, what)
}

// TaskFieldTypeErrors returns, per field of a task-create request, the
// sentence a wrong JSON type gets, so that another way of creating a task
// (an MCP tool) tells its caller what the API tells its own.
func TaskFieldTypeErrors() map[string]string {
	return maps.Clone(fieldTypeErrors)
}
