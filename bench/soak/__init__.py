"""The worker soak (issue 6): long steady load, memory and state plateau, bounded lag, no verdict lost."""
