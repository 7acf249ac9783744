"""One worker process and what it holds: the runtime built at start (`runtime`), the service config file
(`config`), API keys (`auth`), uvicorn's protocol with the config's bounds (`http_protocol`) and the processes
watched and stopped together (`supervision`)."""
