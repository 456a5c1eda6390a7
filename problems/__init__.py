"""Built-in problems; importing this package registers them."""
