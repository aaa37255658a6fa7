"""Parts of the ROS 2 bridge (``federates.ros2.federate.Ros2Bridge``): parameters, the command inbox, the CAM bytes,
the messages and the node. Only ``params``, ``inbox`` and ``cam`` import without rclpy."""
