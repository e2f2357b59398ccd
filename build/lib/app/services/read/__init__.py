"""Read models: the queries behind each console screen."""
