package config

// CodeAssist puts an endpoint on Google's Code Assist API, which serves
// Gemini models to Gemini CLI signed in with a Google account: its base URL
// is https://cloudcode-pa.googleapis.com, it speaks gemini.generate only,
// and every request names the Google Cloud project the account was given
// or chose when Gemini CLI set it up (its onboarding: Sluice does not
// onboard, it takes the project as it is). Its credentials are that
// account's: an oauth credential of grant refresh_token with Gemini CLI's
// client ID and client secret (see docs/cloud.md).
type CodeAssist struct {
	Project string `yaml:"project"` // required
}
