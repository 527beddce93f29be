from kafkalite.protocol.types import TopicPartition


def test_topic_partition_value_semantics():
    tp = TopicPartition("orders", 3)
    assert tp == ("orders", 3)
    assert str(tp) == "orders-3"
    assert {tp: 1}[TopicPartition("orders", 3)] == 1
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)]) == [
        ("a", 1),
        ("a", 2),
        ("b", 0),
    ]
