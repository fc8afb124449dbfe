print("mirrorgate")
