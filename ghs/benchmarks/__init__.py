"""Benchmarks behind `ghs bench`: our code against straightforward baselines."""
