package importer

import (
	"path"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/config"
)

// cliproxyGeminiCLI is a Gemini CLI login (auth type "gemini", channel
// "gemini-cli"): a Google account signed in through Gemini CLI's OAuth
// client, with the Google Cloud project (or a comma-separated list of
// them) that Gemini CLI's onboarding set up for it, served by Google's
// Code Assist API (docs/cloud.md). Google's token endpoint refreshes such
// a login only with the client's ID and secret, which Gemini CLI ships in
// its source: an installed application's secret is not secret, as Google
// says, but the import still keeps it out of the catalog, in a secret
// file.
var cliproxyGeminiCLI = cliproxyLogin{
	imports: (*cliproxyImport).geminiLogin, what: "Gemini CLI", channel: "gemini-cli",
	prov:         provider{name: "code-assist", protocols: []string{"gemini.generate"}},
	baseURL:      "https://cloudcode-pa.googleapis.com",
	tokenURL:     "https://oauth2.googleapis.com/token",
	clientID:     "681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com",
	clientSecret: "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",
	body:         config.OAuthBodyForm,
	models: []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-3-pro-preview",
		"gemini-3.1-pro-preview", "gemini-3-flash-preview", "gemini-3.1-flash-lite-preview"},
	listed: "when it last served them (it dropped Gemini CLI logins in June 2026)",
	approx: "CLIProxyAPI presents itself to Code Assist as Gemini CLI (its User-Agent and X-Goog-Api-Client headers) and reshapes each request (default safety settings, tool schemas cleaned for Gemini, empty turns dropped); Sluice sends the Gemini body its caller or translator made, as User-Agent sluice",
}

// geminiLogin maps a Gemini CLI login to an oauth credential for each of
// its projects, each on the Code Assist endpoint of its project and in the
// upstream account of its project: logins of one project (of several
// Google accounts) share one account. The login's refresh token is written
// once, to a file every credential of the login reads (Google does not
// rotate refresh tokens); Gemini CLI's client secret to one file for
// every login.
func (im *cliproxyImport) geminiLogin(o *object, file string, l cliproxyLogin) error {
	if im.disabledLogin(o) {
		return nil
	}
	email := o.str("email")
	token := o.object("token")
	refresh, from := token.str("refresh_token"), token.at("refresh_token")
	if refresh == "" { // CLIProxyAPI also read it at the top
		refresh, from = o.str("refresh_token"), o.at("refresh_token")
	}
	raw := o.str("project_id")
	if err := o.err(); err != nil {
		return err
	}
	var projects []string
	for p := range strings.SplitSeq(raw, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(projects, p) {
			projects = append(projects, p)
		}
	}
	switch {
	case refresh == "":
		im.report.notMapped(o.path, "not imported: a %s login without a refresh_token, which Sluice needs to obtain access tokens", l.what)
		return nil
	case len(projects) == 0:
		im.report.notMapped(o.path, "not imported: a %s login without a project_id; Code Assist serves a login under the Google Cloud project Gemini CLI set up for it, and Sluice does not set one up: sign in with Gemini CLI once, then import again", l.what)
		return nil
	}
	name := l.channel + "-" + or(email, strings.TrimSuffix(file, ".json"))
	tokenFile := im.secretFile(slug(name)+"-refresh-token", refresh, "the "+l.what+" login "+file+" (oauth.refresh_token_file)", from)
	im.report.mapped(from, "oauth refresh_token grant at %s with Gemini CLI's client ID and client secret, the token in a refresh_token_file", l.tokenURL)
	im.report.mapped(o.at("project_id"), "one credential, Code Assist endpoint and upstream account per project: %s", strings.Join(projects, ", "))
	if email != "" {
		im.report.mapped(o.at("email"), "the credentials' IDs")
	}
	im.report.approx(o.at("type"), "%s", l.approx)
	models := im.loginModels(o, l)
	prefix := o.str("prefix")
	if prefix != "" {
		im.report.mapped(o.at("prefix"), "aliases %s/… on Code Assist endpoints of their own, which only this login's credentials serve", prefix)
	}
	for _, project := range projects {
		cr := config.Credential{
			ID: im.newID("credential", name+"-"+project), Account: im.projectAccount(file, project),
			Endpoints: []string{im.codeAssistEndpoint(l, project, prefix)},
			OAuth: config.OAuth{TokenURL: l.tokenURL, ClientID: l.clientID, RefreshTokenFile: tokenFile, Body: l.body,
				ClientSecretFile: im.geminiClientSecret(l)},
		}
		im.serve(cr, models, prefix)
	}
	token.rest(&im.report, "no Sluice equivalent", cliproxyLoginRest)
	o.rest(&im.report, "no Sluice equivalent", cliproxyLoginRest)
	return o.err()
}

// geminiClientSecret is the file of Gemini CLI's client secret, written
// once for every login.
func (im *cliproxyImport) geminiClientSecret(l cliproxyLogin) string {
	const name = "gemini-cli-client-secret"
	if file := path.Join(im.secretsDir, name); im.files[file] != nil {
		return file
	}
	return im.secretFile(name, l.clientSecret, "the Gemini CLI logins' credentials (oauth.client_secret_file)", "Gemini CLI's public OAuth client, as its source has it")
}

// codeAssistEndpoint is the Code Assist endpoint of a Google Cloud project;
// with a prefix, one of its own for the login that has it.
func (im *cliproxyImport) codeAssistEndpoint(l cliproxyLogin, project, prefix string) string {
	identity := l.prov.name + " " + project + " " + prefix
	if i, ok := im.endpoints[identity]; ok {
		return im.catalog.Endpoints[i].ID
	}
	id := l.prov.name + "-" + project
	if prefix != "" {
		id += "-" + prefix
	}
	ep := config.Endpoint{ID: im.newID("endpoint", id), BaseURL: l.baseURL, Protocols: l.prov.protocols, CodeAssist: &config.CodeAssist{Project: project}}
	im.endpoints[identity] = len(im.catalog.Endpoints)
	im.endpointByID[ep.ID] = len(im.catalog.Endpoints)
	im.catalog.Endpoints = append(im.catalog.Endpoints, ep)
	return ep.ID
}

// projectAccount is the upstream account of a Google Cloud project: every
// Gemini CLI login of the project is in it.
func (im *cliproxyImport) projectAccount(file, project string) string {
	return im.loginsAccount("gemini-cli project "+project, "gemini-cli-"+project, file+" (project_id "+project+")")
}
