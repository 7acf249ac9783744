"""The verifier of a routing class, below both the router and the service: building it from its config and
measuring its error rates on stored probe runs."""
