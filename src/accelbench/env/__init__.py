"""The stack under test: device description, fingerprint, vendor tools, published peaks."""
