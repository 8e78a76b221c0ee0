"""The paper's NSP/SOP coherence check at small scale (README.md)."""
