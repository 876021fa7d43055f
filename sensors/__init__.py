"""Per-host measurement of local load: lambda, rho, mu, sigma and tau."""
