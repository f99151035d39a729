pragma solidity ^0.8.24;

library LibEIP7702 {
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7702;
    using EIP7702.EIP7