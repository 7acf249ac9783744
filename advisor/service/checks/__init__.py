"""Whether a rung's reply is a step the client can use: well formed for the client that asked (`step_check`), no
give-up or refusal (`give_ups`), no answer before the tools the user named (`skipped_tools`)."""
