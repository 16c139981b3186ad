package config

import (
	"maps"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestValidateKeySameAsCatalog checks that a key of the admin API is refused
// for the same reasons, with the same messages, as the key in the catalog:
// only the path prefix differs ("keys[0]." there, none here).
func TestValidateKeySameAsCatalog(t *testing.T) {
	tests := []struct {
		name string
		give func(k *Key)
		want string // the message, its path relative to the key
	}{
		{"UnknownAlias", func(k *Key) { k.Models = []string{"fast", "nope"} }, `models[1]: unknown model alias "nope"`},
		{"UnknownPriority", func(k *Key) { k.Priority = "urgent" }, `priority: must be one of [interactive standard background], got "urgent"`},
		{"UnknownMode", func(k *Key) { k.Policy.Mode = "sticky" }, `policy.mode: must be one of [default strict preferred pool], got "sticky"`},
		{"UnknownPool", func(k *Key) { k.Policy = Policy{Mode: "pool", Pool: "gone"} }, `policy.pool: unknown pool "gone"`},
		{"PoolWithoutMode", func(k *Key) { k.Policy.Pool = "background" }, "policy.pool: only used with mode pool"},
		{"NegativeLimit", func(k *Key) { k.Limits.RPM = -1 }, "limits.rpm: must be >= 0"},
		{"NegativeUserLimit", func(k *Key) { k.UserLimits.DailyTokens = -1 }, "user_limits.daily_tokens: must be >= 0"},
		{"UnknownTask", func(k *Key) { k.Task = "nope" }, `task: unknown task type "nope"`},
		{"UnknownTasks", func(k *Key) { k.Tasks = []string{"chat", "nope"} }, `tasks[1]: unknown task type "nope"`},
		{"BadExpiry", func(k *Key) { k.ExpiresAt = "tomorrow" }, `expires_at: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got "tomorrow"`},
		{"BadLabelName", func(k *Key) { k.Labels = map[string]string{"a b": "x"} }, `labels.a b: name "a b" may contain only letters, digits, '.', '_' and '-'`},
		{"LongLabelValue", func(k *Key) { k.Labels = map[string]string{"team": strings.Repeat("x", 257)} }, "labels.team: value is longer than 256 bytes"},
		{"UnknownPath", func(k *Key) { k.Paths = []string{"chat", "images"} }, `paths[1]: must be one of [chat embeddings fal gemini gemini_embeddings messages responses responses_compact videos], got "images"`},
		{"EmptyServiceTier", func(k *Key) { k.ServiceTiers = []string{""} }, "service_tiers[0]: must not be empty"},
		{"UnknownOnLimit", func(k *Key) { k.OnLimit = "drop" }, `on_limit: must be wait or refuse, got "drop"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base(t)
			c.TaskTypes = []TaskType{{ID: "chat"}}
			key := Key{ID: "api", Tenant: "t"}
			tt.give(&key)
			ApplyKeyDefaults(&key)

			api := ValidateKey(c, &key)
			if api == nil || !strings.HasPrefix(api.Error(), tt.want) {
				t.Errorf("ValidateKey = %v, want %q", api, tt.want)
			}
			key.SecretEnv = "SLUICE_KEY_ADMIN_API"
			c.Keys = append([]Key{key}, c.Keys...)
			env := maps.Clone(testEnv)
			env["SLUICE_KEY_ADMIN_API"] = "sk-sluice-api-0001"
			if err := Validate(c, lookup(env)); err == nil || !strings.Contains(err.Error(), "keys[0]."+api.Error()) {
				t.Errorf("Validate = %v, want it to hold keys[0].%v", err, api)
			}
		})
	}
}

func TestValidateKeyAcceptsEveryField(t *testing.T) {
	c := base(t)
	c.TaskTypes = []TaskType{{ID: "chat"}, {ID: "batch"}}
	k := Key{
		Models: []string{"fast"}, Priority: "background", ExpiresAt: "2030-01-01T00:00:00Z",
		KeySettings: sluice.KeySettings{
			Policy: Policy{Mode: "pool", Pool: "background"}, Limits: Limits{RPM: 60, MaxInflight: 2}, UserLimits: Limits{RPM: 6},
			Task: "chat", Tasks: []string{"batch"}, Labels: map[string]string{"team": "search"}, Paths: []string{"chat", "fal"},
			ServiceTiers: []string{"flex"}, OnLimit: "refuse",
		},
	}
	if err := ValidateKey(c, &k); err != nil {
		t.Errorf("ValidateKey = %v, want nil", err)
	}
}
