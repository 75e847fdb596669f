"""What every training and evaluation run needs whatever the model: device and precision, torchrun processes,
Ctrl-C, the metrics log and external loggers, compilation, batch prefetching. One concept per module."""
