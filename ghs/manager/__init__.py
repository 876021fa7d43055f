"""The performance communication manager (PCM): stores measurements, answers queries."""
