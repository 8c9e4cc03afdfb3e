"""accelbench: validate and benchmark a PyTorch accelerator stack and keep every result."""

__version__ = "0.1.0"
