package config

// Load is what every catalog source runs: Decode, ApplyDefaults, then
// Validate with lookupEnv (nil means os.LookupEnv). It returns the catalog
// only when it is valid; otherwise the error lists every problem found by
// the first step that failed.
func Load(data []byte, lookupEnv func(string) (string, bool)) (*Catalog, error) {
	return LoadServing(data, lookupEnv, nil)
}

// LoadServing is Load where serves says which endpoints can serve an
// alias (see ValidateServing).
func LoadServing(data []byte, lookupEnv func(string) (string, bool), serves Serves) (*Catalog, error) {
	c, err := Decode(data)
	if err != nil {
		return nil, err
	}
	ApplyDefaults(c)
	if err := ValidateServing(c, lookupEnv, serves); err != nil {
		return nil, err
	}
	return c, nil
}
