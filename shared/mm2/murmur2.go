package mm2

import "encoding/binary"

// Murmur2 returns the 32-bit murmur2 hash of b exactly as Kafka's Java
// org.apache.kafka.common.utils.Utils.murmur2 computes it (seed 0x9747b28c, little-endian
// 4-byte blocks), including its signed result.
func Murmur2(b []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	// All arithmetic is on uint32, which wraps like Java's int; the final conversion keeps
	// the bit pattern. Java's ">>>" is a logical shift, which uint32's ">>" is too.
	h := uint32(seed) ^ uint32(len(b))
	n := len(b) &^ 3
	for i := 0; i < n; i += 4 {
		k := binary.LittleEndian.Uint32(b[i : i+4])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) & 3 {
	case 3:
		h ^= uint32(b[n+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[n+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[n])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition returns the partition the Java producer's default partitioner picks for a
// record with a non-null key when the topic has numPartitions partitions:
// (murmur2(key) & 0x7fffffff) % numPartitions (Utils.toPositive, then modulo). It panics if
// numPartitions is not positive, as a modulo by zero would in Java.
func KeyPartition(key []byte, numPartitions int32) int32 {
	if numPartitions <= 0 {
		panic("mm2.KeyPartition: numPartitions must be positive")
	}
	return (Murmur2(key) & 0x7fffffff) % numPartitions
}
