package degraded

// Share is share, for the tests.
var Share = share
