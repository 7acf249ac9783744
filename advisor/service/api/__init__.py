"""The OpenAI API as the service accepts it: the request (`request`), the tools it offers (`tools`), the bounds
it meets before any expensive work (`limits`), and messages to a rung's prompt and its reply back (`chat`)."""
