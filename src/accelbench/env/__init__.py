"""The stack under test: device description, product identification, fingerprint, vendor
tools, published peaks."""
