"""Node health: is the hardware healthy and wired as it should be (the `health` benchmark,
`accelbench health`, the health section of `accelbench validate --level`)."""
