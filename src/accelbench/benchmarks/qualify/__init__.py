"""Qualification: does this node do what its GPU model should? The `gate` check judges
each figure of the node against per-model gates shipped as data (`accelbench qualify`,
`accelbench validate --level`)."""
