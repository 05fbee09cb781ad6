"""Started with every Python process of the torch-suite run (the directory is
on PYTHONPATH): torch's DataLoader is stoker's in the test process and in
every process it spawns (a test that runs its loader in a spawned child
re-imports the test module there, where no conftest runs)."""
import os

if os.environ.get("STOKER_TORCH_SUITE_LOADER", "stoker") == "stoker":
    import torch.utils.data

    import stoker

    torch.utils.data.DataLoader = stoker.DataLoader
