"""What the service writes down: per-worker segments and their ingest (`recording`, `spool_lines`), shipping to
PostgreSQL (`shipping`), captured steps (`capture`) and Prometheus metrics (`metrics`)."""
