"""The learned router, by concept: `model` (the trained artifact, its features and cost model), `training`
(fitting it and choosing its default rule), `routing` (the rule and the registered policies that choose a
chain), `evaluation` (offline held-out evaluation and its tables) and `feedback` (live outcomes, drift and
gated promotion)."""
