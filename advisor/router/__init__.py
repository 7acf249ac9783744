"""The learned router: features, training, artifact, policy and offline evaluation."""
