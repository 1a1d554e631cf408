"""One instance of a serving product (proxy or edge) over N worker processes: the snapshot store every worker
answers from, the one sync that feeds it (the leader) and each worker's side (the follower)."""
