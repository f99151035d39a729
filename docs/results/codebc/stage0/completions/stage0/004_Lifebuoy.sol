pragma solidity ^0.8.4;

contract Lifebuoy {
    uint256 _lifebuoyId;
    uint256 _lifebuoyType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint256 _lifebuoyTypeType;
    uint