package sqlcatalog

// SetAuditBatch makes RetainAudit delete n entries per transaction.
func (s *Store) SetAuditBatch(n int) { s.auditBatch = n }
