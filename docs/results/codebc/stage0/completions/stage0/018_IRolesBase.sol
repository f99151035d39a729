pragma solidity ^0.8.0;

interface IRolesBase {
    struct Roles {
        uint256 _id;
        uint256 _name;
        uint256 _role;
        uint256 _roleType;
        uint256 _roleTypeType;
        uint256 _roleTypeType;
        uint256 _roleTypeTypeType;
        uint256 _roleTypeTypeType;
        uint256 _roleTypeTypeTypeType;
        uint256 _roleTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeType;
        uint256 _roleTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeTypeType;
        uint25