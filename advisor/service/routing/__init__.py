"""The choice of a rung and the walk of the request's attempts: the decision and its chain (`dispatch`), each
attempt (`attempts`), load (`load`), context windows (`context_window`), the shadow router (`shadow`), hot reload of
the router (`reload`) and the episodic policies served as a model (`served`, `orchestrated`)."""
