"""The OpenAI API as the service accepts it: the request and the tools it offers (`request`), reading one off the
wire (`parse`), the bounds it meets before any expensive work (`limits`), and messages to a rung's prompt and its
reply back (`chat`)."""
