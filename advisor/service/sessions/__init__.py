"""Agent sessions: the latch that keeps a trajectory on one rung and the signals that move it up (`latch`), what a
session is expected to cost and the rung it starts on (`costs`), and a step's plan and outcome (`steps`)."""
