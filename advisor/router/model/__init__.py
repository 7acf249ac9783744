"""The trained router: the artifact and its validation, request features (hashed n-grams, cues, class prediction)
and the per-request cost model."""
