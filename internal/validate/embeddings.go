package validate

import "fmt"

// embeddings checks an OpenAI embeddings request: input present and not
// "", [] or an array holding "" or [].
func embeddings(body []byte) *Refusal {
	input := member(body, "input")
	if empty(input) {
		return refuse(ReasonEmpty, "input", "must not be empty")
	}
	return each(input, func(i int, v []byte) *Refusal {
		if empty(v) && string(v) != "null" {
			return refuse(ReasonEmpty, fmt.Sprintf("input[%d]", i), "must not be empty")
		}
		return nil
	})
}
