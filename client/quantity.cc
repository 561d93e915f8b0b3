// Implemented by the client work in progress.
