// Implemented by the metrics work in progress.
