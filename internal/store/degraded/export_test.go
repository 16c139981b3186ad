package degraded

// Share is share, for the tests.
var Share = share

// ScaleCandidate is scaleCandidate, for the histories of one replica among
// several.
var ScaleCandidate = scaleCandidate
