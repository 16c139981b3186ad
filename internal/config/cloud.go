package config

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/sluicehq/sluice"
)

// Azure puts an endpoint on Azure OpenAI: its base URL is the resource's
// (https://{resource}.openai.azure.com), a deployment's model is the Azure
// deployment's name, and every request names the API version.
//
// An endpoint block rather than protocols of their own (azure.openai):
// the body Azure takes is OpenAI's, so the endpoint keeps speaking
// openai.chat (and openai.embeddings), and everything that serves an
// openai.chat endpoint (passthrough, the translators from Anthropic,
// Responses and Gemini callers, validation of who can serve an alias)
// serves it unchanged; only the upstream dialect (URL, credential) is the
// cloud's. Vertex and Bedrock follow the same rule.
type Azure struct {
	APIVersion string `yaml:"api_version"` // e.g. 2024-10-21; required
}

// Vertex puts an endpoint on Google Vertex AI: its base URL is the
// regional API's (https://{location}-aiplatform.googleapis.com, or
// https://aiplatform.googleapis.com for location global), and its models
// are published models: Gemini (gemini.generate) and Anthropic's Claude
// (anthropic.messages), addressed under the project and location.
type Vertex struct {
	Project  string `yaml:"project"`  // required
	Location string `yaml:"location"` // required: us-central1, europe-west4, global, …
}

// Host is the cloud that hosts the endpoint's protocols; the zero Host
// when none.
func (e *Endpoint) Host() sluice.Host {
	switch {
	case e.Azure != nil:
		return sluice.Host{Cloud: sluice.CloudAzure, APIVersion: e.Azure.APIVersion}
	case e.Vertex != nil:
		return sluice.Host{Cloud: sluice.CloudVertex, Project: e.Vertex.Project, Location: e.Vertex.Location}
	case e.Bedrock != nil:
		return sluice.Host{Cloud: sluice.CloudBedrock, Region: e.Bedrock.region(e.BaseURL)}
	case e.CodeAssist != nil:
		return sluice.Host{Cloud: sluice.CloudCodeAssist, Project: e.CodeAssist.Project}
	case e.ChatGPT != nil:
		return sluice.Host{Cloud: sluice.CloudChatGPT}
	}
	return sluice.Host{}
}

// cloudName is what a cloud's settings may be: letters, digits and the
// punctuation of API versions, project IDs and locations, nothing that
// would change a URL's path or query.
var cloudName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// cloud checks an endpoint's cloud block: one at most, its settings
// present and safe in a URL, and only protocols the cloud hosts.
func (v *validator) cloud(at string, e *Endpoint) {
	setting := func(path, value string) {
		switch {
		case value == "":
			v.addf(path, "required")
		case !cloudName.MatchString(value):
			v.addf(path, "must be letters, digits, '.', '_' or '-'")
		}
	}
	set := 0
	for _, block := range []bool{e.Azure != nil, e.Vertex != nil, e.Bedrock != nil, e.CodeAssist != nil, e.ChatGPT != nil} {
		if block {
			set++
		}
	}
	if set > 1 {
		v.addf(at, "set only one of azure, vertex, bedrock, code_assist and chatgpt")
		return
	}
	var cloud string
	switch {
	case e.Bedrock != nil:
		v.bedrock(at, e)
		return
	case e.Azure != nil:
		cloud = "azure"
		setting(at+".azure.api_version", e.Azure.APIVersion)
	case e.Vertex != nil:
		cloud = "vertex"
		setting(at+".vertex.project", e.Vertex.Project)
		setting(at+".vertex.location", e.Vertex.Location)
	case e.CodeAssist != nil:
		cloud = "code_assist"
		setting(at+".code_assist.project", e.CodeAssist.Project)
	case e.ChatGPT != nil:
		cloud = "chatgpt" // no settings: the block says where the endpoint is
	default:
		return
	}
	hosted := sluice.CloudProtocols[e.Host().Cloud]
	for j, p := range e.Protocols {
		if sluice.Protocol(p).Known() && !slices.Contains(hosted, sluice.Protocol(p)) {
			v.addf(fmt.Sprintf("%s.protocols[%d]", at, j), "%s does not host %s (it hosts %v)", cloud, p, hosted)
		}
	}
}
