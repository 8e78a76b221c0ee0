"""Does pretraining on real unlabelled reviews help real benchmarks? (README.md)."""
