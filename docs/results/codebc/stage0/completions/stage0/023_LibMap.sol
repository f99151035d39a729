pragma solidity ^0.8.13;

library LibMap {
    struct Map {
        uint256 _id;
        uint256 _value;
        uint256 _next;
        uint256 _prev;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;
        uint256 _nextIndex;
        uint256 _prevIndex;