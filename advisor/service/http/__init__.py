"""The HTTP surface: the Starlette routes (`app`), a finished request's response and records (`response`), the
Responses API (`responses`) and server-sent events (`streaming`)."""
