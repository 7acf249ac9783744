"""Choosing a chain for requests: the rule's maths, the registered routing policies, and routing with a trained
artifact."""
