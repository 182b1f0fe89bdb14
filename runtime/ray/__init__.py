"""The Ray executor and everything that touches Ray: the cluster connection, node workers,
staged calls, distributed arrays (``DistributedArray``) and their creation and storage tasks."""
